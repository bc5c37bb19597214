"""`inferwatch triage`: name the kind of slow from Prometheus, with evidence."""
