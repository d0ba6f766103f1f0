// Placeholder: the FleetProtocol module is being written (see the open issues).
