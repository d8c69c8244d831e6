package admin

import (
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"teamsbot/access"
	"teamsbot/internal/chartjs"
	"teamsbot/store"
)

// overviewPeriods are the periods the overview offers, in days.
var overviewPeriods = []int{7, 30, 90}

// overviewPage is /admin/overview: the tenant's usage over a period, as
// charts and as the tables of their figures.
type overviewPage struct {
	pageData
	Days    int
	Periods []int
	O       store.Overview
	// Refusals are the period's refusals by reason, in words.
	Refusals []namedCount
	// Tools are the most called tools, at most maxTopTools.
	Tools []store.Count
}

// namedCount is a count with its label for people.
type namedCount struct {
	Label string
	N     int64
}

// refusalWords says what each refusal reason of the usage rollup is.
func refusalWords(reason string) string {
	switch reason {
	case store.RefusalPolicy:
		return "Tool call forbidden by a Cedar policy"
	case store.RefusalUndecided:
		return "Tool call without an access decision"
	case store.RefusalNotAllowed:
		return "Tool call the agent does not offer"
	case store.RefusalView:
		return "View that is not a valid MCP App"
	case store.RefusalAPIKey:
		return "Runs API call with a refused key"
	}
	if r, ok := strings.CutPrefix(reason, store.RefusalMessage); ok {
		return "Message refused (" + r + ")"
	}
	return reason
}

// maxTopTools is how many tools the overview lists.
const maxTopTools = 10

func (h *Handler) overviewPage(c echo.Context, p access.Person) error {
	days := 30
	if v := c.QueryParam("days"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || (n != 7 && n != 30 && n != 90) {
			return errBadPeriod
		}
		days = n
	}
	// Whole UTC days, today included.
	to := h.now().UTC().Truncate(24*time.Hour).AddDate(0, 0, 1)
	o, err := h.opts.Store.Overview(c.Request().Context(), p.TenantID, to.AddDate(0, 0, -days), to)
	if err != nil {
		return err
	}
	d := &overviewPage{Days: days, Periods: overviewPeriods, O: o, Tools: o.Tools[:min(len(o.Tools), maxTopTools)]}
	for _, r := range o.Refusals {
		d.Refusals = append(d.Refusals, namedCount{Label: refusalWords(r.Name), N: r.N})
	}
	return h.render(c, http.StatusOK, "overview", "Overview", p, d, "")
}

// overviewScript is the overview page's script: Chart.js, bundled by
// internal/chartjs, drawing each chart from its table.
func overviewScript() string { return chartjs.Script() }
