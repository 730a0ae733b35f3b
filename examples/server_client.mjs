// A client of korely-server with Node's own fetch (Node 18 or later), for Giulia's token:
//   KORELY_SERVER=http://127.0.0.1:8080 KORELY_TOKEN=kmcp_... node examples/server_client.mjs
const server = process.env.KORELY_SERVER ?? "http://127.0.0.1:8080";
const headers = {
  Authorization: `Bearer ${process.env.KORELY_TOKEN}`,
  "Content-Type": "application/json",
};

async function call(method, path, body) {
  const answer = await fetch(server + path, { method, headers, body: JSON.stringify(body) });
  const data = await answer.json();
  if (!answer.ok) throw new Error(`${answer.status} ${data.error.code}: ${data.error.message}`);
  return data;
}

const fact = await call("POST", "/v1/facts", { key: "home-city", content: "Giulia lives in Rome" });
await call("PATCH", `/v1/facts/${fact.id}`, { content: "Giulia lives in Milan" });
const block = await call("GET", `/v1/context?query=${encodeURIComponent("Where does she live?")}`);
console.log(block.text);
