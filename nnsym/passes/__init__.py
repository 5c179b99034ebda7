"""Graph passes: pure ``Graph -> Graph`` functions with declared requirements."""
