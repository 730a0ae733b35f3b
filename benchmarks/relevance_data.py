"""A person's facts as an assistant would collect them, and questions about them asked the way
people ask, each with the one fact it must find.

The person (Giulia) has facts about herself and her contacts (where they live, where they work,
birthdays, phone numbers, languages, allergies, past cities, sports), orders, tickets, projects and
meetings, and the preference notes of ``data.items``. Many facts share words (every contact
lives somewhere; first names and surnames recur; cities are homes, offices and destinations), and
some are near duplicates (a home city and a past city). Order in the list is age: the last fact is
the newest.

Each question is asked four ways: in other word forms ("living" for "lives"), in another word
order, with partial words and abbreviations ("bday", "tkt"), and as a question instead of a
statement. Everything comes from a fixed seed: every run and every contender sees the same text.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from .data import Item, items

PHRASINGS = ("forms", "order", "partial", "question")


def _listed(words: str) -> list[str]:
    return words.split()


_FIRST = _listed(
    "Luca Marco Sara Elena Paolo Chiara Davide Anna Matteo Francesca Andrea Laura Simone Marta "
    "Stefano Silvia Alessandro Valentina Giorgio Federica Roberto Irene Nicola Paola Riccardo "
    "Giorgia Fabio Alessia Tommaso Martina Pietro Serena Enrico Camilla Filippo Beatrice Lorenzo "
    "Sofia Daniele Noemi"
)
_LAST = _listed(
    "Rossi Bianchi Romano Colombo Ricci Marino Greco Bruno Gallo Conti Costa Giordano Mancini "
    "Rizzo Lombardi Moretti Barbieri Fontana Santoro Mariani Rinaldi Caruso Ferrara Galli Martini"
)
_CITIES = _listed(
    "Rome Milan Turin Naples Genoa Bologna Florence Venice Verona Padua Trieste Bari Palermo "
    "Catania Parma Modena Pisa Lucca Bergamo Brescia Trento Bolzano Perugia Ancona Lecce Cagliari "
    "Zurich Geneva Vienna Munich Lyon Paris Madrid Lisbon Berlin London Dublin Prague Athens Nice"
)
_COMPANIES = _listed(
    "Acme Globex Initech Umbrella Hooli Vandelay Stark Wayne Wonka Tyrell Cyberdyne Soylent "
    "Aperture Oscorp Gringotts Monarch Massive Dynamic Virtucon Nakatomi"
)
_ROLES = [
    "a project manager",
    "the head of sales",
    "a data analyst",
    "an accountant",
    "a software engineer",
    "the office manager",
    "a buyer",
    "a lawyer",
    "a support lead",
    "the finance director",
]
_MONTHS = _listed(
    "January February March April May June July August September October November December"
)
_LANGUAGES = _listed("Italian English German French Spanish Portuguese")
_ALLERGENS = _listed("peanuts shellfish gluten lactose eggs sesame pollen penicillin")
_DIETS = _listed("vegetarian vegan halal kosher pescatarian")
_SPORTS = _listed("tennis padel football volleyball basketball golf chess squash")
_DAYS = _listed("Monday Tuesday Wednesday Thursday Friday Saturday Sunday")
_PRODUCTS = [
    "laptops",
    "monitors",
    "office chairs",
    "printer toner",
    "standing desks",
    "headsets",
    "docking stations",
    "paper reams",
    "coffee capsules",
    "webcams",
]
_CARRIERS = _listed("DHL UPS FedEx courier post")
_PROBLEMS = [
    "does not start",
    "was delivered broken",
    "was invoiced twice",
    "arrived late",
    "has the wrong keyboard layout",
    "cannot connect to the network",
]
_STATUS = ["still open", "solved", "waiting for a refund", "escalated to the vendor"]
_CODES = _listed("Blue Red Green Silver Golden Amber North Polar Swift Quiet")
_ANIMALS = _listed("Falcon Otter Heron Fox Lynx Badger Dolphin Panther Raven Wolf")
_TOPICS = _listed("budget hiring roadmap billing security marketing onboarding logistics")


@dataclass(frozen=True)
class Query:
    text: str
    key: str
    phrasing: str


@dataclass(frozen=True)
class Fact:
    """A fact and the four ways of asking for it (none for the preference notes)."""

    item: Item
    asks: tuple[str, str, str, str] | None = None


def _person(name: str, slug: str, rng: random.Random) -> list[Fact]:
    first, *_ = name.split()
    city, past = rng.sample(_CITIES, 2)
    day, month = rng.randint(1, 28), rng.choice(_MONTHS)
    return [
        Fact(
            Item(f"{slug}-home-city", f"{name} lives in {city}"),
            (
                f"Which city is {name} living in?",
                f"city {name} lives in",
                f"{first} {name.split()[-1][:1]}. home cty",
                f"Where does {name} live?",
            ),
        ),
        Fact(
            Item(
                f"{slug}-employer",
                f"{name} works at {rng.choice(_COMPANIES)} as {rng.choice(_ROLES)}",
            ),
            (
                f"who is {name} working for",
                f"{name} employer and role",
                f"{name} employ",
                f"Which company does {name} work at?",
            ),
        ),
        Fact(
            Item(f"{slug}-birthday", f"{name}'s birthday is on {day} {month}"),
            (
                f"birthdays: {name}",
                f"birthday of {name}, which date",
                f"bday {name}",
                f"When is {name}'s birthday?",
            ),
        ),
        Fact(
            Item(
                f"{slug}-phone",
                f"{name}'s mobile phone number is +39 3{rng.randint(10, 99)} "
                f"{rng.randint(1000000, 9999999)}",
            ),
            (
                f"phoning {name}: which numbers?",
                f"number for {name}, mobile phone",
                f"{name} mob. no.",
                f"What is {name}'s phone number?",
            ),
        ),
        Fact(
            Item(
                f"{slug}-language",
                f"{name} prefers to be written to in {rng.choice(_LANGUAGES)}",
            ),
            (
                f"{name}'s preferred language for writing",
                f"language {name} prefers",
                f"{name} pref. lang.",
                f"Which language does {name} prefer?",
            ),
        ),
        Fact(
            Item(
                f"{slug}-diet",
                f"{name} is allergic to {rng.choice(_ALLERGENS)} and eats {rng.choice(_DIETS)} "
                "food",
            ),
            (
                f"{name} allergies",
                f"food {name} eats",
                f"{name} allerg",
                f"What is {name} allergic to?",
            ),
        ),
        Fact(
            Item(
                f"{slug}-previous-city", f"{name} lived in {past} until {rng.randint(2005, 2022)}"
            ),
            (
                f"where was {name} living before",
                f"previous city {name}",
                f"{name} prev. city",
                f"Where did {name} live before?",
            ),
        ),
        Fact(
            Item(f"{slug}-sport", f"{name} plays {rng.choice(_SPORTS)} every {rng.choice(_DAYS)}"),
            (
                f"what is {name} playing",
                f"sport {name} plays",
                f"{name} hobb.",
                f"Which sport does {name} play?",
            ),
        ),
    ]


def _order(n: int, rng: random.Random) -> Fact:
    return Fact(
        Item(
            f"order-{n}",
            f"Order {n}: {rng.randint(2, 40)} {rng.choice(_PRODUCTS)} shipped to the "
            f"{rng.choice(_CITIES)} office by {rng.choice(_CARRIERS)}",
        ),
        (
            f"shipping for order {n}",
            f"{n} order shipped where",
            f"ord. #{n}",
            f"What was in order {n}?",
        ),
    )


def _ticket(n: int, rng: random.Random) -> Fact:
    return Fact(
        Item(
            f"ticket-{n}",
            f"Ticket {n}: the {rng.choice(_PRODUCTS)} {rng.choice(_PROBLEMS)}; "
            f"{rng.choice(_STATUS)}",
        ),
        (
            f"tickets {n} status",
            f"{n} ticket problem",
            f"tkt {n}",
            f"What was ticket {n} about?",
        ),
    )


def _project(code: str, lead: str, rng: random.Random) -> Fact:
    return Fact(
        Item(
            f"project-{code.lower().replace(' ', '-')}",
            f"Project {code} for {rng.choice(_COMPANIES)} is due on {rng.randint(1, 28)} "
            f"{rng.choice(_MONTHS)}; {lead} leads it",
        ),
        (
            f"who is leading project {code}",
            f"{code} project due date",
            f"proj {code} deadline",
            f"When is project {code} due?",
        ),
    )


def _meeting(topic: str, name: str, rng: random.Random) -> Fact:
    return Fact(
        Item(
            f"meeting-{topic}-{name.lower().replace(' ', '-')}",
            f"The {topic} meeting with {name} is every {rng.choice(_DAYS)} at "
            f"{rng.randint(8, 17)}:{rng.choice(['00', '30'])}",
        ),
        (
            f"when are we meeting {name} about {topic}",
            f"{topic} with {name}: meeting time",
            f"mtg {name} {topic}",
            f"When is the {topic} meeting with {name}?",
        ),
    )


# Shares of the facts past Giulia's own: contacts, orders, tickets, projects, meetings, notes.
_SHARES = (0.6, 0.12, 0.1, 0.06, 0.04, 0.08)


def world(n: int, seed: int = 16) -> list[Fact]:
    """``n`` facts of one person, oldest first, from ``seed``."""
    rng = random.Random(seed)
    names = [f"{f} {s}" for f in _FIRST for s in _LAST]
    rng.shuffle(names)
    own = _person("Giulia", "giulia", rng)[: min(n, 8)]
    rest = n - len(own)
    counts = [int(rest * share) for share in _SHARES]
    counts[0] += rest - sum(counts)
    contacts = [f for name in names[: counts[0] // 8 + 1] for f in _slug_person(name, rng)]
    numbers = rng.sample(range(1000, 99999), counts[1] + counts[2])
    codes = _codes(counts[3], rng)
    made = [
        contacts[: counts[0]],
        [_order(k, rng) for k in numbers[: counts[1]]],
        [_ticket(k, rng) for k in numbers[counts[1] :]],
        [_project(code, rng.choice(names[:200]), rng) for code in codes],
        _meetings(counts[4], names, rng),
        [Fact(i) for i in items(counts[5] + 1, seed=seed)[1:]],
    ]
    facts = own + [f for part in made for f in part]
    rng.shuffle(facts)
    return facts


def _codes(count: int, rng: random.Random) -> list[str]:
    """Project code names: two words, then a number when there are more projects than pairs."""
    pairs = [f"{c} {a}" for c in _CODES for a in _ANIMALS]
    rng.shuffle(pairs)
    return [
        pairs[i % len(pairs)] + (f" {i // len(pairs) + 1}" if i >= len(pairs) else "")
        for i in range(count)
    ]


def _slug_person(name: str, rng: random.Random) -> list[Fact]:
    return _person(name, name.lower().replace(" ", "-"), rng)


def _meetings(count: int, names: list[str], rng: random.Random) -> list[Fact]:
    pairs = [(t, name) for name in names[:300] for t in _TOPICS]
    return [_meeting(t, name, rng) for t, name in rng.sample(pairs, count)]


def queries(facts: list[Fact], targets: int, seed: int = 16) -> list[Query]:
    """Each of ``targets`` facts (spread over every age), asked in each of the four ways."""
    rng = random.Random(seed)
    askable = [f for f in facts if f.asks is not None]
    chosen = rng.sample(askable, min(targets, len(askable)))
    return [
        Query(text, fact.item.key, phrasing)
        for fact in chosen
        for phrasing, text in zip(PHRASINGS, fact.asks or (), strict=True)
    ]
