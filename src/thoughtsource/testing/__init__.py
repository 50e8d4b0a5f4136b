"""Test and benchmark helpers shipped with the library (a fault-injecting OpenAI-compatible server)."""
