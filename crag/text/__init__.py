"""Language handling shared by the index, the grader and the answer composer."""
