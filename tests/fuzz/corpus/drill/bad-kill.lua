kill{ node = "x", at_s = -1 }
