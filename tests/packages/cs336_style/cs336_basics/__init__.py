"""CS336 assignment 1 basics: the student's own package."""
