"""The answer cache: in memory, or in Redis shared by every instance."""
