return { trian = { steps = 5 } }
