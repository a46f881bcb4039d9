//! The tools' view of the verbs API.
