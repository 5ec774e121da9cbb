//! OWNER: helper H1.
