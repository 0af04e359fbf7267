//! graphloom example: permit-filing (being written).
