package main

import (
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"teamsbot/store"
)

// backupHandler serves GET /backup on the internal listener: a consistent
// copy of the bbolt file, made in one read transaction while the service
// goes on serving. The file is locked while the service runs, so this is
// the only way to copy it without stopping the service. It holds every
// record of every tenant: it is served on the internal listener alone,
// like the profiler. On PostgreSQL the records are the database's, and
// pg_dump (or the provider's backups) copies them.
func backupHandler(st *store.Store, logger *slog.Logger) echo.HandlerFunc {
	return func(c echo.Context) error {
		w := c.Response()
		// A large file takes longer than the listener's write timeout.
		if err := http.NewResponseController(w.Writer).SetWriteDeadline(time.Time{}); err != nil {
			return fmt.Errorf("backup: %w", err)
		}
		h := w.Header()
		h.Set(echo.HeaderContentType, "application/octet-stream")
		h.Set(echo.HeaderContentDisposition, `attachment; filename="`+storeFile+`"`)
		h.Set(echo.HeaderCacheControl, "no-store")
		start := time.Now()
		n, err := st.Backup(c.Request().Context(), w)
		if err != nil {
			// Once bytes are out, the status is sent: the copy ends short
			// and the client sees the connection close before the end.
			logger.Error("backup failed", "bytes", n, "err", err)
			if n == 0 && !w.Committed {
				return err
			}
			panic(http.ErrAbortHandler)
		}
		logger.Info("backup", "bytes", n, "took", time.Since(start))
		return nil
	}
}
