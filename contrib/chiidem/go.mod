module github.com/idemkit/idemkit/contrib/chiidem

go 1.26.0

require github.com/idemkit/idemkit v0.0.0-00010101000000-000000000000

require github.com/go-chi/chi/v5 v5.5.0 // indirect

replace github.com/idemkit/idemkit => ../..
