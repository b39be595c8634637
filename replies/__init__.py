"""Replies: a CragResult as the activity a channel gets (card, Teams message). Builds, never sends."""
