"""The agent benchmark: an invented world (`world`), its fixed task set (`tasks`), the
answer check (`score`) and the runs through `aerix.Agent` (`run`)."""
