package devserver

// Done is closed when the server process has exited.
func (s *Server) Done() <-chan struct{} { return s.p.Exited() }
