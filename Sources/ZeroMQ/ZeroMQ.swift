// Placeholder: the ZeroMQ module is being written (see the open issues).
