"""Query rewriting: question (+ recent turns) -> search keywords."""
