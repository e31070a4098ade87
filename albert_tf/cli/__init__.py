"""Console-script entry points (absl flags live here and nowhere else)."""
