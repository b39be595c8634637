"""`python -m crag.feedback`: the feedback CLI (the app's feedback/ package) under the name the
operations guide uses; nothing else lives here."""
