package server

import "time"

// SetStalledWrite shortens how long a write to a taken-over connection
// may stall before its client counts as gone (a minute otherwise).
func SetStalledWrite(h *Handler, d time.Duration) { h.conns.stall = d }
