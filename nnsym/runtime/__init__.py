"""Running compiled graphs and single operators."""
