//! graphloom example: support-chat (being written).
