"""The decisions of a read: its steps, the candidate statement, the changes to tell, relevance."""
