"""The overlay service of the private cloud: which chunks a query touches (the planner) and the
final step that joins partial results.  The partitioning tree will live here too."""
