//! OWNER: helper H4.
