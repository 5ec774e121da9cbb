//! OWNER: helper H3.
