// Placeholder: the SignatureCapture module is being written (see the open issues).
