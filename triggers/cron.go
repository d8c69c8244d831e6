package triggers

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// ErrCron is wrapped by every error of ParseCron, a *CronError.
var ErrCron = errors.New("triggers: bad cron expression")

// CronError is an expression ParseCron refused: every field at fault,
// each with what it accepts, or why the expression as a whole cannot be
// read. Its text is in plain words, with no package prefix, to be shown
// to the admin who typed the expression.
type CronError struct {
	// Expr is the expression as given.
	Expr string
	// Problems are the faults, one per bad field, in field order:
	// "minute `61`: use 0-59".
	Problems []string
}

func (e *CronError) Error() string { return strings.Join(e.Problems, "; ") }

// Unwrap makes errors.Is(err, ErrCron) hold.
func (e *CronError) Unwrap() error { return ErrCron }

// maxCronLen bounds an expression: five fields of lists fit easily.
const maxCronLen = 256

// cronSearchYears bounds how far Next looks for a due time. Every
// expression that can ever be due is due within 8 years (29 February on a
// given weekday is the rarest), so one that is not is refused by ParseCron.
const cronSearchYears = 8

// Schedule is a parsed five-field cron expression: minute, hour, day of
// month, month, day of week, as in Vixie cron. It is immutable.
type Schedule struct {
	expr              string
	minute, hour, dom uint64 // bit i set: value i matches
	month, dow        uint64
	domStar, dowStar  bool // the field began with "*": the other one decides alone
}

// cronField describes one field.
type cronField struct {
	name     string
	min, max int
	names    []string // names for min, min+1, ... (months, weekdays)
}

// accepts says what the field takes.
func (f cronField) accepts() string {
	if f.names != nil {
		return fmt.Sprintf("use %d-%d or %s-%s", f.min, f.max, f.names[0], f.names[len(f.names)-1])
	}
	return fmt.Sprintf("use %d-%d", f.min, f.max)
}

// cronFields returns the five fields in order. A function, so that no
// package-level table can be changed.
func cronFields() [5]cronField {
	return [5]cronField{
		{name: "minute", min: 0, max: 59},
		{name: "hour", min: 0, max: 23},
		{name: "day of month", min: 1, max: 31},
		{name: "month", min: 1, max: 12, names: []string{"jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"}},
		// 7 is Sunday too, as in Vixie cron.
		{name: "day of week", min: 0, max: 7, names: []string{"sun", "mon", "tue", "wed", "thu", "fri", "sat"}},
	}
}

// cronMacro expands the shorthands Vixie cron accepts instead of five
// fields.
func cronMacro(s string) (string, bool) {
	switch strings.ToLower(s) {
	case "@yearly", "@annually":
		return "0 0 1 1 *", true
	case "@monthly":
		return "0 0 1 * *", true
	case "@weekly":
		return "0 0 * * 0", true
	case "@daily", "@midnight":
		return "0 0 * * *", true
	case "@hourly":
		return "0 * * * *", true
	}
	return "", false
}

// ParseCron parses a standard five-field cron expression:
//
//	minute (0-59) hour (0-23) day-of-month (1-31) month (1-12 or jan-dec) day-of-week (0-7 or sun-sat; 0 and 7 are Sunday)
//
// Each field is "*", a value, a range "a-b", any of these followed by a
// step "/n", or a comma-separated list of them. Names are case-insensitive.
// @yearly, @monthly, @weekly, @daily and @hourly stand for their usual
// five fields. As in Vixie cron, when both the day of month and the day of
// week are restricted (neither begins with "*"), a day matches when either
// does. An expression that can never be due (30 February) is refused.
//
// A refused expression is a *CronError that names every bad field and what
// it accepts.
func ParseCron(expr string) (*Schedule, error) {
	expr = strings.TrimSpace(expr)
	refuse := func(problems ...string) error { return &CronError{Expr: expr, Problems: problems} }
	if len(expr) > maxCronLen {
		return nil, refuse(fmt.Sprintf("it is longer than %d characters", maxCronLen))
	}
	text := expr
	if strings.HasPrefix(expr, "@") {
		m, ok := cronMacro(expr)
		if !ok {
			return nil, refuse(fmt.Sprintf("`%s` is not one of @yearly, @annually, @monthly, @weekly, @daily, @midnight and @hourly", expr))
		}
		text = m
	}
	parts := strings.Fields(text)
	if len(parts) != 5 {
		return nil, refuse(fmt.Sprintf("it has %d fields; a schedule has 5: minute, hour, day of month, month and day of week (such as `30 8 * * mon-fri`)", len(parts)))
	}
	s := &Schedule{expr: expr}
	fields := cronFields()
	sets := [5]*uint64{&s.minute, &s.hour, &s.dom, &s.month, &s.dow}
	var problems []string
	for i, f := range fields {
		bits, problem := f.parse(parts[i])
		if problem != "" {
			problems = append(problems, fmt.Sprintf("%s `%s`: %s", f.name, parts[i], problem))
		}
		*sets[i] = bits
	}
	if problems != nil {
		return nil, refuse(problems...)
	}
	if s.dow&(1<<7) != 0 {
		s.dow = s.dow&^(1<<7) | 1
	}
	s.domStar = strings.HasPrefix(parts[2], "*")
	s.dowStar = strings.HasPrefix(parts[4], "*")
	// Only a day of month with no month to fall in can never be due.
	if s.next(time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC), time.UTC).IsZero() {
		return nil, refuse("it is never due: none of its months has such a day")
	}
	return s, nil
}

// String returns the expression as it was given.
func (s *Schedule) String() string { return s.expr }

// parse reads one field into a bit set, or says in words what is wrong
// with it.
func (f cronField) parse(field string) (uint64, string) {
	var bits uint64
	for item := range strings.SplitSeq(field, ",") {
		if item == "" {
			return 0, "a list item is empty; " + f.accepts() + ", separated by commas"
		}
		rng, stepText, hasStep := strings.Cut(item, "/")
		step := 1
		if hasStep {
			n, err := strconv.Atoi(stepText)
			if err != nil || n < 1 || n > f.max-f.min+1 {
				return 0, fmt.Sprintf("the step after `/` must be a whole number from 1 to %d", f.max-f.min+1)
			}
			step = n
		}
		lo, hi := f.min, f.max
		switch {
		case rng == "*":
		case strings.Contains(rng, "-"):
			a, b, _ := strings.Cut(rng, "-")
			if a == "" || b == "" {
				return 0, "a range needs a value on each side of `-`; " + f.accepts()
			}
			var ok bool
			if lo, ok = f.value(a); !ok {
				return 0, f.notOne(field, a)
			}
			if hi, ok = f.value(b); !ok {
				return 0, f.notOne(field, b)
			}
			if lo > hi {
				return 0, fmt.Sprintf("the range `%s` runs backwards: write the smaller value first", rng)
			}
		default:
			v, ok := f.value(rng)
			if !ok {
				return 0, f.notOne(field, rng)
			}
			lo, hi = v, v
			if hasStep {
				// "5/15" means from 5 to the end in steps of 15, as in
				// Vixie cron.
				hi = f.max
			}
		}
		for v := lo; v <= hi; v += step {
			bits |= 1 << v
		}
	}
	return bits, ""
}

// notOne says that v, in field, is not a value of the field.
func (f cronField) notOne(field, v string) string {
	if v == field {
		return f.accepts()
	}
	return fmt.Sprintf("`%s` is not a %s; %s", v, f.name, f.accepts())
}

// value reads one number or name of the field.
func (f cronField) value(s string) (int, bool) {
	for i, n := range f.names {
		if strings.EqualFold(s, n) {
			return f.min + i, true
		}
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < f.min || n > f.max {
		return 0, false
	}
	return n, true
}

// dayMatches applies the day-of-month / day-of-week rule to a date.
func (s *Schedule) dayMatches(d time.Time) bool {
	dom := s.dom&(1<<d.Day()) != 0
	dow := s.dow&(1<<int(d.Weekday())) != 0
	if s.domStar || s.dowStar {
		return dom && dow
	}
	return dom || dow
}

// Next returns the first due time strictly after after, in loc's wall
// clock. Times are whole minutes. Across daylight saving changes each wall
// time is due once: a wall time that occurs twice (autumn) is due at its
// first occurrence, and one that does not occur (spring) is due at the end
// of the gap, the first instant after it. The zero time means none within
// 8 years, which ParseCron rules out.
func (s *Schedule) Next(after time.Time, loc *time.Location) time.Time {
	if loc == nil {
		loc = time.UTC
	}
	return s.next(after, loc)
}

func (s *Schedule) next(after time.Time, loc *time.Location) time.Time {
	// Walk wall-clock dates and times (as UTC values, which have no gaps)
	// from the wall minute after after's, skipping whole months, days and
	// hours that cannot match.
	w := after.In(loc)
	wall := time.Date(w.Year(), w.Month(), w.Day(), w.Hour(), w.Minute(), 0, 0, time.UTC).Add(time.Minute)
	// A wall time in a repeated hour can be before after's own wall time
	// and still due later: start an hour back and let the instant decide.
	wall = wall.Add(-time.Hour)
	end := wall.AddDate(cronSearchYears, 0, 0)
	for wall.Before(end) {
		switch {
		case s.month&(1<<int(wall.Month())) == 0:
			wall = time.Date(wall.Year(), wall.Month()+1, 1, 0, 0, 0, 0, time.UTC)
		case !s.dayMatches(wall):
			wall = time.Date(wall.Year(), wall.Month(), wall.Day()+1, 0, 0, 0, 0, time.UTC)
		case s.hour&(1<<wall.Hour()) == 0:
			wall = wall.Truncate(time.Hour).Add(time.Hour)
		case s.minute&(1<<wall.Minute()) == 0:
			wall = wall.Add(time.Minute)
		default:
			if t := instant(wall, loc); t.After(after) {
				return t
			}
			wall = wall.Add(time.Minute)
		}
	}
	return time.Time{}
}

// instant is the first instant whose wall clock in loc reads wall (given
// as a UTC value), or, when no instant does (a spring-forward gap), the
// first instant after the gap.
func instant(wall time.Time, loc *time.Location) time.Time {
	var best time.Time
	// The offsets in force a day either side cover every offset the wall
	// time could have.
	for _, probe := range []time.Time{wall.Add(-26 * time.Hour), wall, wall.Add(26 * time.Hour)} {
		_, off := probe.In(loc).Zone()
		t := wall.Add(-time.Duration(off) * time.Second)
		l := t.In(loc)
		if l.Year() == wall.Year() && l.Month() == wall.Month() && l.Day() == wall.Day() &&
			l.Hour() == wall.Hour() && l.Minute() == wall.Minute() && (best.IsZero() || t.Before(best)) {
			best = t
		}
	}
	if !best.IsZero() {
		return best
	}
	// In a gap: read the wall time with the offset before the change;
	// that instant lies after the change, whose start is the gap's end.
	_, off := wall.Add(-26 * time.Hour).In(loc).Zone()
	start, _ := wall.Add(-time.Duration(off) * time.Second).In(loc).ZoneBounds()
	return start
}

// LatestDue returns the latest due time in (after, now], or the zero time
// when there is none. It finds it without visiting every due time in
// between, so a service that was down for months catches up at once.
func (s *Schedule) LatestDue(after, now time.Time, loc *time.Location) time.Time {
	first := s.Next(after, loc)
	if first.IsZero() || first.After(now) {
		return time.Time{}
	}
	// Look back from now in growing steps for a start that still has a
	// due time before now, then walk forward from there.
	from := first
	for back := time.Hour; back < now.Sub(first); back *= 2 {
		if t := s.Next(now.Add(-back), loc); !t.IsZero() && !t.After(now) {
			from = t
			break
		}
	}
	for {
		n := s.Next(from, loc)
		if n.IsZero() || n.After(now) {
			return from
		}
		from = n
	}
}
