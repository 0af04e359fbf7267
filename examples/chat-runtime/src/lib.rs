//! graphloom example: chat-runtime (being written).
