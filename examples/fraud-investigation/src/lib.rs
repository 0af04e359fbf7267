//! graphloom example: fraud-investigation (being written).
