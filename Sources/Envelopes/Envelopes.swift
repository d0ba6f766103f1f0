// Placeholder: the Envelopes module is being written (see the open issues).
