//! VFIO bus (in progress).
