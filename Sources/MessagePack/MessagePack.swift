// Placeholder: the MessagePack module is being written (see the open issues).
