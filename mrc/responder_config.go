package mrc

// ResponderConfig bounds the responder's resources (its receive bitmap,
// packet buffers and other per-QP resources); running out of one draws
// the NACK the spec names for it. The zero value is "unbounded": no such
// NACK is ever generated.
type ResponderConfig struct{}

// validate reports the first invalid field of r.
func (r *ResponderConfig) validate() error { return nil }
