//! graphloom example: memory-supervisor (being written).
