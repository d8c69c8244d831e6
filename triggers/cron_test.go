package triggers

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func mustLoad(t *testing.T, name string) *time.Location {
	t.Helper()
	loc, err := time.LoadLocation(name)
	if err != nil {
		t.Fatal(err)
	}
	return loc
}

// A refused expression names every bad field at once and what it takes,
// in words with no package prefix.
func TestParseCronErrors(t *testing.T) {
	for _, c := range []struct{ expr, want string }{
		{"", "it has 0 fields; a schedule has 5: minute, hour, day of month, month and day of week (such as `30 8 * * mon-fri`)"},
		{"* * * *", "it has 4 fields; a schedule has 5: minute, hour, day of month, month and day of week (such as `30 8 * * mon-fri`)"},
		{"* * * * * *", "it has 6 fields; a schedule has 5"},
		{"60 * * * *", "minute `60`: use 0-59"},
		{"* 24 * * *", "hour `24`: use 0-23"},
		{"* * 0 * *", "day of month `0`: use 1-31"},
		{"* * * 13 *", "month `13`: use 1-12 or jan-dec"},
		{"* * * * 8", "day of week `8`: use 0-7 or sun-sat"},
		{"61 9 * * funday", "minute `61`: use 0-59; day of week `funday`: use 0-7 or sun-sat"},
		{"61 24 32 13 8", "minute `61`: use 0-59; hour `24`: use 0-23; day of month `32`: use 1-31; month `13`: use 1-12 or jan-dec; day of week `8`: use 0-7 or sun-sat"},
		{"0,15,61 * * * mon-funday", "minute `0,15,61`: `61` is not a minute; use 0-59; day of week `mon-funday`: `funday` is not a day of week; use 0-7 or sun-sat"},
		{"*/0 * * * *", "minute `*/0`: the step after `/` must be a whole number from 1 to 60"},
		{"*/x * * * *", "minute `*/x`: the step after `/` must be a whole number from 1 to 60"},
		{"* */25 * * *", "hour `*/25`: the step after `/` must be a whole number from 1 to 24"},
		{"5-1 * * * *", "minute `5-1`: the range `5-1` runs backwards: write the smaller value first"},
		{"1,,2 * * * *", "minute `1,,2`: a list item is empty; use 0-59, separated by commas"},
		{"a * * * *", "minute `a`: use 0-59"},
		{"* * * foo *", "month `foo`: use 1-12 or jan-dec"},
		{"1- * * * *", "minute `1-`: a range needs a value on each side of `-`; use 0-59"},
		{"0 0 30 2 *", "it is never due: none of its months has such a day"},
		{"0 0 31 4,6,9,11 *", "it is never due"},
		{"@reboot", "`@reboot` is not one of @yearly, @annually, @monthly, @weekly, @daily, @midnight and @hourly"},
		{strings.Repeat("1,", 200) + "1 * * * *", "it is longer than 256 characters"},
	} {
		_, err := ParseCron(c.expr)
		var ce *CronError
		if !errors.As(err, &ce) || !errors.Is(err, ErrCron) {
			t.Errorf("ParseCron(%q) = %v, want a *CronError that is ErrCron", c.expr, err)
			continue
		}
		if !strings.HasPrefix(err.Error(), c.want) || strings.Contains(err.Error(), "triggers:") {
			t.Errorf("ParseCron(%q) =\n%s\nwant it to start\n%s", c.expr, err, c.want)
		}
	}
}

// next lists the first n due times after from, in loc, as RFC 3339.
func next(t *testing.T, expr string, from time.Time, loc *time.Location, n int) []string {
	t.Helper()
	s, err := ParseCron(expr)
	if err != nil {
		t.Fatalf("ParseCron(%q): %v", expr, err)
	}
	var out []string
	for range n {
		from = s.Next(from, loc)
		out = append(out, from.In(loc).Format(time.RFC3339))
	}
	return out
}

func TestCronNext(t *testing.T) {
	utc := time.UTC
	start := time.Date(2026, 12, 2, 10, 7, 30, 0, utc) // a Wednesday
	for _, c := range []struct {
		expr string
		want []string
	}{
		{"*/15 * * * *", []string{"2026-12-02T10:15:00Z", "2026-12-02T10:30:00Z", "2026-12-02T10:45:00Z", "2026-12-02T11:00:00Z"}},
		{"* * * * *", []string{"2026-12-02T10:08:00Z", "2026-12-02T10:09:00Z"}},
		{"5/20 * * * *", []string{"2026-12-02T10:25:00Z", "2026-12-02T10:45:00Z", "2026-12-02T11:05:00Z"}},
		{"0 9-11 * * *", []string{"2026-12-02T11:00:00Z", "2026-12-03T09:00:00Z", "2026-12-03T10:00:00Z"}},
		{"0 8,12,18 * * *", []string{"2026-12-02T12:00:00Z", "2026-12-02T18:00:00Z", "2026-12-03T08:00:00Z"}},
		{"30 9 * * mon-fri", []string{"2026-12-03T09:30:00Z", "2026-12-04T09:30:00Z", "2026-12-07T09:30:00Z"}},
		{"0 0 1 jan,JUL *", []string{"2027-01-01T00:00:00Z", "2027-07-01T00:00:00Z"}},
		{"0 12 * * 7", []string{"2026-12-06T12:00:00Z", "2026-12-13T12:00:00Z"}}, // 7 is Sunday
		{"0 12 * * 0", []string{"2026-12-06T12:00:00Z"}},
		{"0 0 29 2 *", []string{"2028-02-29T00:00:00Z", "2032-02-29T00:00:00Z"}},
		{"@daily", []string{"2026-12-03T00:00:00Z"}},
		{"@hourly", []string{"2026-12-02T11:00:00Z"}},
		{"@weekly", []string{"2026-12-06T00:00:00Z"}},
		// Day of month and day of week both restricted: either matches
		// (the 13th, or any Friday), as in Vixie cron.
		{"0 0 13 * fri", []string{"2026-12-04T00:00:00Z", "2026-12-11T00:00:00Z", "2026-12-13T00:00:00Z", "2026-12-18T00:00:00Z"}},
		// One of them starting with "*": both must match (odd days that
		// are Fridays).
		{"0 0 */2 * fri", []string{"2026-12-11T00:00:00Z", "2026-12-25T00:00:00Z", "2027-01-01T00:00:00Z"}},
		{"0 0 1 * *", []string{"2027-01-01T00:00:00Z", "2027-02-01T00:00:00Z"}},
	} {
		got := next(t, c.expr, start, utc, len(c.want))
		if strings.Join(got, " ") != strings.Join(c.want, " ") {
			t.Errorf("%q after %s:\n got %v\nwant %v", c.expr, start.Format(time.RFC3339), got, c.want)
		}
	}
}

// Europe/Berlin leaves 02:00-03:00 out on 29 March 2026 and has it twice
// on 25 October 2026. Each wall time is due once: a missing one at the end
// of the gap, a repeated one at its first occurrence.
func TestCronNextAcrossDaylightSaving(t *testing.T) {
	berlin := mustLoad(t, "Europe/Berlin")
	for _, c := range []struct {
		name string
		expr string
		from time.Time
		want []string
	}{
		{"daily in the spring gap runs at its end", "30 2 * * *", time.Date(2026, 3, 28, 12, 0, 0, 0, berlin),
			[]string{"2026-03-29T03:00:00+02:00", "2026-03-30T02:30:00+02:00"}},
		{"every 15 minutes through the spring gap", "*/15 * * * *", time.Date(2026, 3, 29, 1, 40, 0, 0, berlin),
			[]string{"2026-03-29T01:45:00+01:00", "2026-03-29T03:00:00+02:00", "2026-03-29T03:15:00+02:00"}},
		{"daily in the repeated autumn hour runs once", "30 2 * * *", time.Date(2026, 10, 24, 12, 0, 0, 0, berlin),
			[]string{"2026-10-25T02:30:00+02:00", "2026-10-26T02:30:00+01:00"}},
		{"every 30 minutes through the repeated hour", "*/30 * * * *", time.Date(2026, 10, 25, 1, 50, 0, 0, berlin),
			[]string{"2026-10-25T02:00:00+02:00", "2026-10-25T02:30:00+02:00", "2026-10-25T03:00:00+01:00"}},
		{"daily at 9 keeps the wall clock across the change", "0 9 * * *", time.Date(2026, 3, 28, 10, 0, 0, 0, berlin),
			[]string{"2026-03-29T09:00:00+02:00", "2026-03-30T09:00:00+02:00"}},
	} {
		got := next(t, c.expr, c.from, berlin, len(c.want))
		if strings.Join(got, " ") != strings.Join(c.want, " ") {
			t.Errorf("%s (%q):\n got %v\nwant %v", c.name, c.expr, got, c.want)
		}
	}
	// From inside the second pass of the repeated hour, its wall times
	// have been due already.
	s, _ := ParseCron("*/30 * * * *")
	second := time.Date(2026, 10, 25, 1, 10, 0, 0, time.UTC) // 02:10 CET, the second 02:10
	if got := s.Next(second, berlin).In(berlin).Format(time.RFC3339); got != "2026-10-25T03:00:00+01:00" {
		t.Errorf("after the second 02:10: %s, want 03:00+01:00", got)
	}
}

func TestCronLatestDue(t *testing.T) {
	s, _ := ParseCron("*/15 * * * *")
	after := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	now := time.Date(2026, 3, 1, 10, 20, 0, 0, time.UTC)
	if got := s.LatestDue(after, now, time.UTC); !got.Equal(time.Date(2026, 3, 1, 10, 15, 0, 0, time.UTC)) {
		t.Errorf("LatestDue = %v", got)
	}
	if got := s.LatestDue(now, now.Add(5*time.Minute), time.UTC); !got.IsZero() {
		t.Errorf("nothing due, got %v", got)
	}
	y, _ := ParseCron("0 0 29 2 *")
	if got := y.LatestDue(after, time.Date(2033, 1, 1, 0, 0, 0, 0, time.UTC), time.UTC); !got.Equal(time.Date(2032, 2, 29, 0, 0, 0, 0, time.UTC)) {
		t.Errorf("leap-day LatestDue = %v", got)
	}
}
