package main

import "time"

// devstackDefault is the default of a timing flag (API.md §8).
func devstackDefault(name string) time.Duration {
	switch name {
	case "converging":
		return 30 * time.Second
	case "steady":
		return 5 * time.Minute
	case "gke":
		return 3 * time.Second
	}
	return time.Minute
}
