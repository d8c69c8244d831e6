package triggers

import (
	"testing"
	"time"
)

// BenchmarkCronNext is one due time of a weekday schedule in a zone with
// daylight saving, as each scheduler pass computes per trigger.
func BenchmarkCronNext(b *testing.B) {
	loc, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		b.Fatal(err)
	}
	s, err := ParseCron("30 8 * * mon-fri")
	if err != nil {
		b.Fatal(err)
	}
	from := time.Date(2026, 12, 4, 9, 0, 0, 0, loc) // a Friday after the due time
	b.ReportAllocs()
	for b.Loop() {
		if s.Next(from, loc).IsZero() {
			b.Fatal("no due time")
		}
	}
}

// BenchmarkCronLatestDue is the catch-up after a year down for a
// schedule due every 15 minutes: about 35,000 missed times, run once.
func BenchmarkCronLatestDue(b *testing.B) {
	s, err := ParseCron("*/15 * * * *")
	if err != nil {
		b.Fatal(err)
	}
	after := time.Date(2025, 12, 1, 0, 0, 0, 0, time.UTC)
	now := after.AddDate(1, 0, 0).Add(7 * time.Minute)
	b.ReportAllocs()
	for b.Loop() {
		if s.LatestDue(after, now, time.UTC).IsZero() {
			b.Fatal("nothing due")
		}
	}
}
