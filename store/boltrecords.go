package store

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"go.etcd.io/bbolt"
)

// The records on bbolt: each kind's reads and writes, keys and index
// entries as the package doc draws them. Records come encoded and go in as
// they are; what is read is decoded inside the transaction, since bbolt's
// slices are only valid until it ends.

// getJSON decodes the record under key in bucket; none is ErrNotFound.
func getJSON[T any](t boltTx, bucket string, key []byte) (T, error) {
	var v T
	data := t.bucket(bucket).Get(key)
	if data == nil {
		return v, ErrNotFound
	}
	if err := json.Unmarshal(data, &v); err != nil {
		return v, fmt.Errorf("%s %q: %w", bucket, key, err)
	}
	return v, nil
}

// listJSON decodes every record of bucket whose key starts with prefix,
// in key order.
func listJSON[T any](t boltTx, bucket string, prefix []byte) ([]T, error) {
	return appendJSON[T](nil, t.bucket(bucket).Cursor(), prefix)
}

// appendJSON appends to out every record under c whose key starts with
// prefix, decoded, in key order.
func appendJSON[T any](out []T, c *bbolt.Cursor, prefix []byte) ([]T, error) {
	for k, v := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
		var r T
		if err := json.Unmarshal(v, &r); err != nil {
			return out, fmt.Errorf("%q: %w", k, err)
		}
		out = append(out, r)
	}
	return out, nil
}

// indexKey is each part followed by a NUL, then suffix.
func indexKey(suffix []byte, parts ...string) []byte {
	n := len(suffix)
	for _, p := range parts {
		n += len(p) + 1
	}
	k := make([]byte, 0, n)
	for _, p := range parts {
		k = append(append(k, p...), 0)
	}
	return append(k, suffix...)
}

// prefixEnd returns the smallest key greater than every key starting with
// prefix. Our prefixes end in a NUL byte, so incrementing the last byte is
// enough.
func prefixEnd(prefix []byte) []byte {
	end := bytes.Clone(prefix)
	end[len(end)-1]++
	return end
}

// seekLastUnder moves c to the last key before bound, or before every key
// starting with prefix when bound is nil, and returns it and its value
// (nil if there is none).
func seekLastUnder(c *bbolt.Cursor, prefix, bound []byte) (k, v []byte) {
	if bound == nil {
		bound = prefixEnd(prefix)
	}
	if k, _ = c.Seek(bound); k == nil {
		return c.Last()
	}
	return c.Prev()
}

// timeIDKey is T | id: the key of views_by_expiry and runs_by_time.
func timeIDKey(t [8]byte, id []byte) []byte {
	return append(append(make([]byte, 0, 8+len(id)), t[:]...), id...)
}

// tenantTimeKey is <tenant> 0x00 | T | id: the key of views_by_tenant and
// runs_by_tenant.
func tenantTimeKey(tenant string, t [8]byte, id []byte) []byte {
	return indexKey(timeIDKey(t, id), tenant)
}

// Runs.

func (t boltTx) run(id string) (Run, error) { return getJSON[Run](t, bucketRuns, []byte(id)) }

func (t boltTx) recentRuns(tenant string, limit int) ([]Run, error) {
	prefix := indexKey(nil, tenant)
	c := t.bucket(bucketRunsByTenant).Cursor()
	var out []Run
	for k, _ := seekLastUnder(c, prefix, nil); k != nil && len(out) < limit; k, _ = c.Prev() {
		if !bytes.HasPrefix(k, prefix) || len(k) < len(prefix)+8 {
			break
		}
		r, err := getJSON[Run](t, bucketRuns, k[len(prefix)+8:])
		if err != nil {
			return out, fmt.Errorf("runs_by_tenant %q: %w", k, err)
		}
		out = append(out, r)
	}
	return out, nil
}

func (t boltTx) putRun(r encoded[Run], old *Run) error {
	id := []byte(r.rec.ID)
	byTime, byTenant := t.bucket(bucketRunsByTime), t.bucket(bucketRunsByTenant)
	if old != nil {
		created := timeKey(old.CreatedAt)
		if err := byTime.Delete(timeIDKey(created, id)); err != nil {
			return err
		}
		if err := byTenant.Delete(tenantTimeKey(old.TenantID, created, id)); err != nil {
			return err
		}
	}
	if err := t.bucket(bucketRuns).Put(id, r.json); err != nil {
		return err
	}
	created := timeKey(r.rec.CreatedAt)
	if err := byTime.Put(timeIDKey(created, id), []byte{}); err != nil {
		return err
	}
	return byTenant.Put(tenantTimeKey(r.rec.TenantID, created, id), []byte{})
}

// Views and their documents.

func (t boltTx) view(id string) (View, error) { return getJSON[View](t, bucketViews, []byte(id)) }

func (t boltTx) views(ids ...string) ([]View, error) {
	var out []View
	for _, id := range ids {
		v, err := getJSON[View](t, bucketViews, []byte(id))
		if errors.Is(err, ErrNotFound) {
			continue
		}
		if err != nil {
			return out, err
		}
		out = append(out, v)
	}
	return out, nil
}

func (t boltTx) html(sha string) ([]byte, error) {
	data := t.bucket(bucketHTML).Get([]byte(sha))
	if data == nil {
		return nil, ErrNotFound
	}
	return bytes.Clone(data), nil
}

// putView keeps three entries for a view beside its record: in
// views_by_expiry and views_by_tenant under its end, and its document's
// reference count.
func (t boltTx) putView(v encoded[View], html []byte, old *View) error {
	id, sha := []byte(v.rec.ID), []byte(v.rec.HTMLSHA256)
	expiry, byTenant := t.bucket(bucketViewsByExpiry), t.bucket(bucketViewsByTenant)
	sameHTML := old != nil && old.HTMLSHA256 == v.rec.HTMLSHA256
	if !sameHTML {
		// Take the new reference before dropping the old one.
		if err := addHTMLRef(t.tx, sha, html); err != nil {
			return err
		}
	}
	if old != nil {
		if err := expiry.Delete(timeIDKey(timeKey(old.end()), id)); err != nil {
			return err
		}
		if err := byTenant.Delete(tenantTimeKey(old.TenantID, timeKey(old.CreatedAt), id)); err != nil {
			return err
		}
		if !sameHTML {
			if _, err := dropHTMLRef(t.tx, []byte(old.HTMLSHA256)); err != nil {
				return err
			}
		}
	}
	if err := t.bucket(bucketViews).Put(id, v.json); err != nil {
		return err
	}
	end, created := timeKey(v.rec.end()), timeKey(v.rec.CreatedAt)
	if err := expiry.Put(timeIDKey(end, id), expiryValue(sha, created, v.rec.TenantID)); err != nil {
		return err
	}
	return byTenant.Put(tenantTimeKey(v.rec.TenantID, created, id), end[:])
}

// expiryValue is a views_by_expiry value: the HTML hash (64 hex digits),
// then the view's creation time and tenant, from which the sweep rebuilds
// its views_by_tenant key.
func expiryValue(sha []byte, created [8]byte, tenant string) []byte {
	v := make([]byte, 0, len(sha)+8+len(tenant))
	return append(append(append(v, sha...), created[:]...), tenant...)
}

// shaHexLen is the length of an HTML hash in hex.
const shaHexLen = 64

// addHTMLRef counts one more view using the document sha, storing html if
// it is not stored yet.
func addHTMLRef(tx *bbolt.Tx, sha, html []byte) error {
	refs := tx.Bucket([]byte(bucketHTMLRefs))
	var n uint64
	if v := refs.Get(sha); len(v) == 8 {
		n = binary.BigEndian.Uint64(v)
	}
	if n == 0 {
		if err := tx.Bucket([]byte(bucketHTML)).Put(sha, html); err != nil {
			return err
		}
	}
	return refs.Put(sha, u64(n+1))
}

// dropHTMLRef counts one view less using the document sha and deletes the
// document with its last reference; it reports whether it did.
func dropHTMLRef(tx *bbolt.Tx, sha []byte) (bool, error) {
	refs := tx.Bucket([]byte(bucketHTMLRefs))
	var n uint64
	if v := refs.Get(sha); len(v) == 8 {
		n = binary.BigEndian.Uint64(v)
	}
	if n > 1 {
		return false, refs.Put(sha, u64(n-1))
	}
	if err := refs.Delete(sha); err != nil {
		return false, err
	}
	if err := tx.Bucket([]byte(bucketHTML)).Delete(sha); err != nil {
		return false, err
	}
	return true, nil
}

// activeViews reads views_by_tenant backwards, skipping the views whose
// end (the entry's value) has come without reading them.
func (t boltTx) activeViews(tenant string, now time.Time, pos []byte, scan, limit int) ([]View, []byte, error) {
	prefix := indexKey(nil, tenant)
	var bound []byte
	if pos != nil {
		bound = append(bytes.Clone(prefix), pos...)
	}
	nowKey := timeKey(now)
	c := t.bucket(bucketViewsByTenant).Cursor()
	var out []View
	var last []byte
	scanned := 0
	for k, end := seekLastUnder(c, prefix, bound); k != nil && bytes.HasPrefix(k, prefix); k, end = c.Prev() {
		if scanned == scan || len(out) == limit {
			return out, bytes.Clone(last[len(prefix):]), nil
		}
		scanned++
		last = k
		if len(k) <= len(prefix)+8 || len(end) != 8 {
			return out, nil, fmt.Errorf("views_by_tenant: malformed entry %x", k)
		}
		if bytes.Compare(end, nowKey[:]) <= 0 {
			continue // expired or revoked
		}
		v, err := getJSON[View](t, bucketViews, k[len(prefix)+8:])
		if err != nil {
			return out, nil, fmt.Errorf("views_by_tenant %q: %w", k, err)
		}
		out = append(out, v)
	}
	return out, nil, nil
}

// Conversations.

func (t boltTx) conversation(key string) (ConversationRef, error) {
	return getJSON[ConversationRef](t, bucketConversations, []byte(key))
}

func (t boltTx) conversations(tenant string) ([]ConversationRef, error) {
	prefix := indexKey(nil, tenant)
	var out []ConversationRef
	c := t.bucket(bucketConvsByTenant).Cursor()
	for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Next() {
		ref, err := getJSON[ConversationRef](t, bucketConversations, k[len(prefix):])
		if err != nil {
			return out, fmt.Errorf("conversations_by_tenant %q: %w", k, err)
		}
		out = append(out, ref)
	}
	return out, nil
}

func (t boltTx) putConversation(c encoded[ConversationRef]) error {
	key := []byte(c.rec.Key)
	if err := t.unindexConversation(key); err != nil {
		return err
	}
	if err := t.bucket(bucketConvsByTenant).Put(indexKey(key, c.rec.TenantID), []byte{}); err != nil {
		return err
	}
	return t.bucket(bucketConversations).Put(key, c.json)
}

func (t boltTx) deleteConversation(key string) error {
	k := []byte(key)
	if err := t.unindexConversation(k); err != nil {
		return err
	}
	return t.bucket(bucketConversations).Delete(k)
}

// unindexConversation deletes the conversations_by_tenant entry of the
// stored reference key, if there is one.
func (t boltTx) unindexConversation(key []byte) error {
	old := t.bucket(bucketConversations).Get(key)
	if old == nil {
		return nil
	}
	var hdr struct {
		TenantID string `json:"tenantId"`
	}
	if err := json.Unmarshal(old, &hdr); err != nil {
		return fmt.Errorf("conversation %q: stored record: %w", key, err)
	}
	return t.bucket(bucketConvsByTenant).Delete(indexKey(key, hdr.TenantID))
}

// Deliveries and arrivals.

func (t boltTx) delivery(runID string) (Delivery, error) {
	return getJSON[Delivery](t, bucketDeliveries, []byte(runID))
}

func (t boltTx) putDelivery(d encoded[Delivery]) error {
	return t.bucket(bucketDeliveries).Put([]byte(d.rec.RunID), d.json)
}

func (t boltTx) arrival(key string) (time.Time, error) {
	v := t.bucket(bucketActivities).Get([]byte(key))
	if len(v) != 8 {
		return time.Time{}, ErrNotFound
	}
	return nsTime(keyNS([8]byte(v))), nil
}

// putArrival keeps activities_by_expiry beside activities, for the sweep.
func (t boltTx) putArrival(key string, until time.Time) error {
	k, expires := []byte(key), timeKey(until)
	seen, byExpiry := t.bucket(bucketActivities), t.bucket(bucketActivitiesByExpiry)
	if old := seen.Get(k); old != nil {
		if err := byExpiry.Delete(append(bytes.Clone(old), k...)); err != nil {
			return err
		}
	}
	if err := seen.Put(k, expires[:]); err != nil {
		return err
	}
	return byExpiry.Put(append(expires[:], k...), nil)
}

// Access records.

// bindingKey is a binding's key in bindings/.
func bindingKey(b Binding) []byte {
	return indexKey(nil, b.TenantID, b.AgentID, b.Subject, b.Kind, b.Role)
}

// bindings reads one prefix of bindings/ per subject: the lookup of every
// access decision is one seek per subject.
func (t boltTx) bindings(tenant, agent string, subjects []string) ([]Binding, error) {
	switch {
	case agent == "":
		return listJSON[Binding](t, bucketBindings, indexKey(nil, tenant))
	case subjects == nil:
		return listJSON[Binding](t, bucketBindings, indexKey(nil, tenant, agent))
	}
	var out []Binding
	c := t.bucket(bucketBindings).Cursor()
	for _, sub := range subjects {
		var err error
		if out, err = appendJSON(out, c, indexKey(nil, tenant, agent, sub)); err != nil {
			return out, fmt.Errorf("binding %w", err)
		}
	}
	return out, nil
}

func (t boltTx) putBinding(b encoded[Binding], _ *Binding) error {
	return t.bucket(bucketBindings).Put(bindingKey(b.rec), b.json)
}

func (t boltTx) deleteBinding(b Binding) error {
	return t.bucket(bucketBindings).Delete(bindingKey(b))
}

func (t boltTx) tenantSettings(tenant string) (TenantSettings, error) {
	return getJSON[TenantSettings](t, bucketTenantSettings, []byte(tenant))
}

func (t boltTx) putTenantSettings(ts encoded[TenantSettings], _ *TenantSettings) error {
	return t.bucket(bucketTenantSettings).Put([]byte(ts.rec.TenantID), ts.json)
}

func (t boltTx) policySet(tenant string) (PolicySet, error) {
	return getJSON[PolicySet](t, bucketPolicySets, []byte(tenant))
}

func (t boltTx) putPolicySet(p encoded[PolicySet], _ *PolicySet) error {
	return t.bucket(bucketPolicySets).Put([]byte(p.rec.TenantID), p.json)
}

// API keys and triggers.

// apiKey finds the key's tenant in api_key_ids, then the key.
func (t boltTx) apiKey(id string) (APIKey, error) {
	tenant := t.bucket(bucketAPIKeyIDs).Get([]byte(id))
	if tenant == nil {
		return APIKey{}, ErrNotFound
	}
	k, err := getJSON[APIKey](t, bucketAPIKeys, indexKey([]byte(id), string(tenant)))
	if errors.Is(err, ErrNotFound) {
		return k, fmt.Errorf("api_key_ids names tenant %q without its key", tenant)
	}
	return k, err
}

func (t boltTx) apiKeys(tenant string) ([]APIKey, error) {
	return listJSON[APIKey](t, bucketAPIKeys, indexKey(nil, tenant))
}

func (t boltTx) putAPIKey(k encoded[APIKey], _ *APIKey) error {
	if err := t.bucket(bucketAPIKeyIDs).Put([]byte(k.rec.ID), []byte(k.rec.TenantID)); err != nil {
		return err
	}
	return t.bucket(bucketAPIKeys).Put(indexKey([]byte(k.rec.ID), k.rec.TenantID), k.json)
}

// triggerKey is a trigger's key in triggers/; convTriggerKey its entry in
// triggers_by_conversation/.
func triggerKey(tenant, id string) []byte { return indexKey([]byte(id), tenant) }
func convTriggerKey(tenant, conv, id string) []byte {
	return indexKey([]byte(id), tenant, conv)
}

func (t boltTx) trigger(tenant, id string) (Trigger, error) {
	return getJSON[Trigger](t, bucketTriggers, triggerKey(tenant, id))
}

// triggers reads a tenant's prefix of triggers/, or of
// triggers_by_conversation/ when conversation is given, or every trigger.
func (t boltTx) triggers(tenant, conversation string) ([]Trigger, error) {
	switch {
	case tenant == "":
		return listJSON[Trigger](t, bucketTriggers, nil)
	case conversation == "":
		return listJSON[Trigger](t, bucketTriggers, indexKey(nil, tenant))
	}
	prefix := indexKey(nil, tenant, conversation)
	var out []Trigger
	c := t.bucket(bucketTriggersByConv).Cursor()
	for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Next() {
		tr, err := t.trigger(tenant, string(k[len(prefix):]))
		if errors.Is(err, ErrNotFound) {
			continue
		}
		if err != nil {
			return out, err
		}
		out = append(out, tr)
	}
	return out, nil
}

func (t boltTx) putTrigger(tr encoded[Trigger], old *Trigger) error {
	byConv := t.bucket(bucketTriggersByConv)
	if old != nil && old.ConversationID != tr.rec.ConversationID {
		if err := byConv.Delete(convTriggerKey(old.TenantID, old.ConversationID, old.ID)); err != nil {
			return err
		}
	}
	if err := t.bucket(bucketTriggers).Put(triggerKey(tr.rec.TenantID, tr.rec.ID), tr.json); err != nil {
		return err
	}
	return byConv.Put(convTriggerKey(tr.rec.TenantID, tr.rec.ConversationID, tr.rec.ID), []byte{})
}

func (t boltTx) deleteTrigger(tr Trigger) error {
	if err := t.bucket(bucketTriggers).Delete(triggerKey(tr.TenantID, tr.ID)); err != nil {
		return err
	}
	return t.bucket(bucketTriggersByConv).Delete(convTriggerKey(tr.TenantID, tr.ConversationID, tr.ID))
}

// claimDue has nothing to add on bbolt: writes are one after another, and
// the stored LastDue the claim.
func (t boltTx) claimDue(Trigger) error { return nil }

// MCP connections and authorization requests.

// mcpConnectionKey is a connection's key in mcp_connections/, a person's
// first; mcpServerKey its entry in mcp_connections_by_server/, a server's
// people together.
func mcpConnectionKey(tenant, user, agent, server string) []byte {
	return indexKey(nil, tenant, user, agent, server)
}

func mcpServerKey(c MCPConnection) []byte {
	return indexKey(nil, c.TenantID, c.AgentID, c.Server, c.UserID)
}

// mcpServerEntry is the value of a connection's mcp_connections_by_server
// entry: T(LastUsedAt), or nothing while it was never used. MCPServerUses
// reads the index alone.
func mcpServerEntry(c MCPConnection) []byte {
	if c.LastUsedAt.IsZero() {
		return []byte{}
	}
	k := timeKey(c.LastUsedAt)
	return k[:]
}

func (t boltTx) mcpConnection(tenant, user, agent, server string) (MCPConnection, error) {
	return getJSON[MCPConnection](t, bucketMCPConnections, mcpConnectionKey(tenant, user, agent, server))
}

// mcpConnections reads a person's prefix of mcp_connections/ when f names
// the user, else the tenant's, agent's or server's prefix of
// mcp_connections_by_server/.
func (t boltTx) mcpConnections(f MCPConnectionFilter) ([]MCPConnection, error) {
	if f.UserID != "" {
		parts := []string{f.TenantID, f.UserID}
		if f.AgentID != "" {
			parts = append(parts, f.AgentID)
			if f.Server != "" {
				parts = append(parts, f.Server)
			}
		}
		return listJSON[MCPConnection](t, bucketMCPConnections, indexKey(nil, parts...))
	}
	parts := []string{f.TenantID}
	if f.AgentID != "" {
		parts = append(parts, f.AgentID)
		if f.Server != "" {
			parts = append(parts, f.Server)
		}
	}
	tenant := indexKey(nil, f.TenantID)
	prefix := indexKey(nil, parts...)
	var out []MCPConnection
	c := t.bucket(bucketMCPConnsByServer).Cursor()
	for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Next() {
		agent, server, user, err := mcpServerKeyParts(k[len(tenant):])
		if err != nil {
			return out, err
		}
		if f.Server != "" && server != f.Server {
			continue
		}
		conn, err := t.mcpConnection(f.TenantID, user, agent, server)
		if err != nil {
			return out, fmt.Errorf("mcp_connections_by_server %q: %w", k, err)
		}
		out = append(out, conn)
	}
	return out, nil
}

// mcpServerKeyParts splits what follows the tenant in a key of
// mcp_connections_by_server/.
func mcpServerKeyParts(rest []byte) (agent, server, user string, err error) {
	parts := bytes.Split(rest, []byte{0})
	if len(parts) != 4 || len(parts[3]) != 0 {
		return "", "", "", fmt.Errorf("mcp_connections_by_server: malformed key %q", rest)
	}
	return string(parts[0]), string(parts[1]), string(parts[2]), nil
}

// mcpServerUses counts the entries of the tenant's prefix of
// mcp_connections_by_server/, which come grouped by agent and server.
func (t boltTx) mcpServerUses(tenant string) ([]MCPServerUse, error) {
	prefix := indexKey(nil, tenant)
	var out []MCPServerUse
	c := t.bucket(bucketMCPConnsByServer).Cursor()
	for k, v := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
		agent, server, _, err := mcpServerKeyParts(k[len(prefix):])
		if err != nil {
			return out, err
		}
		if n := len(out); n == 0 || out[n-1].AgentID != agent || out[n-1].Server != server {
			out = append(out, MCPServerUse{AgentID: agent, Server: server})
		}
		use := &out[len(out)-1]
		use.People++
		if len(v) == 8 {
			if at := nsTime(keyNS([8]byte(v))); at.After(use.LastUsedAt) {
				use.LastUsedAt = at
			}
		}
	}
	return out, nil
}

func (t boltTx) putMCPConnection(c encoded[MCPConnection], _ *MCPConnection) error {
	r := c.rec
	if err := t.bucket(bucketMCPConnections).Put(mcpConnectionKey(r.TenantID, r.UserID, r.AgentID, r.Server), c.json); err != nil {
		return err
	}
	return t.bucket(bucketMCPConnsByServer).Put(mcpServerKey(r), mcpServerEntry(r))
}

func (t boltTx) deleteMCPConnection(c MCPConnection) error {
	if err := t.bucket(bucketMCPConnections).Delete(mcpConnectionKey(c.TenantID, c.UserID, c.AgentID, c.Server)); err != nil {
		return err
	}
	return t.bucket(bucketMCPConnsByServer).Delete(mcpServerKey(c))
}

func (t boltTx) mcpAuthRequest(id string) (MCPAuthRequest, error) {
	return getJSON[MCPAuthRequest](t, bucketMCPAuthRequests, []byte(id))
}

// mcpAuthRequestByState finds the request's id in mcp_auth_by_state.
func (t boltTx) mcpAuthRequestByState(state string) (MCPAuthRequest, error) {
	id := t.bucket(bucketMCPAuthByState).Get([]byte(state))
	if id == nil {
		return MCPAuthRequest{}, ErrNotFound
	}
	r, err := getJSON[MCPAuthRequest](t, bucketMCPAuthRequests, id)
	if errors.Is(err, ErrNotFound) {
		return r, fmt.Errorf("mcp_auth_by_state names request %q, which is not stored", id)
	}
	return r, err
}

// putMCPAuthRequest keeps two entries beside the request: its id under
// its state, and its state under T(ExpiresAt) | id, which the sweep reads.
func (t boltTx) putMCPAuthRequest(r encoded[MCPAuthRequest], old *MCPAuthRequest) error {
	byState, byExpiry := t.bucket(bucketMCPAuthByState), t.bucket(bucketMCPAuthByExpiry)
	if old != nil {
		if err := byState.Delete([]byte(old.State)); err != nil {
			return err
		}
		if err := byExpiry.Delete(timeIDKey(timeKey(old.ExpiresAt), []byte(old.ID))); err != nil {
			return err
		}
	}
	id := []byte(r.rec.ID)
	if err := t.bucket(bucketMCPAuthRequests).Put(id, r.json); err != nil {
		return err
	}
	if err := byState.Put([]byte(r.rec.State), id); err != nil {
		return err
	}
	return byExpiry.Put(timeIDKey(timeKey(r.rec.ExpiresAt), id), []byte(r.rec.State))
}

func (t boltTx) question(id string) (Question, error) {
	return getJSON[Question](t, bucketQuestions, []byte(id))
}

// putQuestion keeps the question's entry under T(ExpiresAt) | id beside
// it, which the sweep reads.
func (t boltTx) putQuestion(q encoded[Question], old *Question) error {
	if old != nil {
		if err := t.bucket(bucketQuestionsByExpiry).Delete(timeIDKey(timeKey(old.ExpiresAt), []byte(old.ID))); err != nil {
			return err
		}
	}
	id := []byte(q.rec.ID)
	if err := t.bucket(bucketQuestions).Put(id, q.json); err != nil {
		return err
	}
	return t.bucket(bucketQuestionsByExpiry).Put(timeIDKey(timeKey(q.rec.ExpiresAt), id), []byte{})
}

func (t boltTx) deleteQuestion(q Question) error {
	if err := t.bucket(bucketQuestions).Delete([]byte(q.ID)); err != nil {
		return err
	}
	return t.bucket(bucketQuestionsByExpiry).Delete(timeIDKey(timeKey(q.ExpiresAt), []byte(q.ID)))
}

// Conversation history.

// turnKey is a turn's key in history/: its conversation and agent, then
// its Seq, so that a conversation's turns of an agent are one prefix in
// the order they were appended.
func turnKey(tenant, conversation, agent string, seq uint64) []byte {
	return indexKey(u64(seq), tenant, conversation, agent)
}

// boltTurn decodes a turn of history/: its Seq from the key, the rest
// from its value, T(at) | L | its record's JSON | its messages, where L
// is the length of the JSON (4 bytes big-endian). The messages are
// copied out of the transaction's memory.
func boltTurn(k, v []byte) (HistoryTurn, error) {
	record, messages, err := turnValueParts(v)
	if err != nil || len(k) < 8 {
		return HistoryTurn{}, fmt.Errorf("history %q: malformed", k)
	}
	tr, err := decodeTurn(record, binary.BigEndian.Uint64(k[len(k)-8:]), bytes.Clone(messages))
	if err != nil {
		return tr, fmt.Errorf("history %q: %w", k, err)
	}
	return tr, nil
}

// turnValue is a turn's value in history/.
func turnValue(tr encoded[HistoryTurn]) []byte {
	at := timeKey(tr.rec.At)
	v := make([]byte, 0, 12+len(tr.json)+len(tr.rec.Messages))
	v = binary.BigEndian.AppendUint32(append(v, at[:]...), uint32(len(tr.json)))
	return append(append(v, tr.json...), tr.rec.Messages...)
}

// turnValueParts splits a turn's value after its T(at).
func turnValueParts(v []byte) (record, messages []byte, err error) {
	if len(v) < 12 {
		return nil, nil, errors.New("short value")
	}
	n := int(binary.BigEndian.Uint32(v[8:12]))
	if len(v) < 12+n {
		return nil, nil, errors.New("short value")
	}
	return v[12 : 12+n], v[12+n:], nil
}

// turns reads the prefix of the conversation and agent backwards from
// its end: the newest turns are read first, and no others.
func (t boltTx) turns(tenant, conversation, agent string, limit int, keep func(seq uint64, record, messages []byte) (bool, error)) error {
	prefix := indexKey(nil, tenant, conversation, agent)
	c := t.bucket(bucketHistory).Cursor()
	n := 0
	for k, v := seekLastUnder(c, prefix, nil); k != nil && n < limit && bytes.HasPrefix(k, prefix); k, v = c.Prev() {
		record, messages, err := turnValueParts(v)
		if err != nil || len(k) < 8 {
			return fmt.Errorf("history %q: malformed", k)
		}
		n++
		if more, err := keep(binary.BigEndian.Uint64(k[len(k)-8:]), record, messages); err != nil || !more {
			return err
		}
	}
	return nil
}

// appendTurn numbers the turn from history/'s sequence and keeps its
// entry in history_by_time beside it, for the sweep. The turn's value
// starts with T(at), so that deleting the turn finds that entry without
// decoding it.
func (t boltTx) appendTurn(tr encoded[HistoryTurn], numbered func(uint64)) error {
	history := t.bucket(bucketHistory)
	seq, err := history.NextSequence()
	if err != nil {
		return err
	}
	r := tr.rec
	key := turnKey(r.TenantID, r.ConversationID, r.AgentID, seq)
	if err := history.Put(key, turnValue(tr)); err != nil {
		return err
	}
	if err := t.bucket(bucketHistoryByTime).Put(timeIDKey(timeKey(r.At), u64(seq)), key); err != nil {
		return err
	}
	numbered(seq)
	return nil
}

// deleteTurns reads the conversation's prefix of history/ (every agent's)
// and the prefix of its threads, then deletes what it read, with the
// entries of history_by_time.
func (t boltTx) deleteTurns(tenant, conversation, threads string, deleted func(int)) error {
	history, byTime := t.bucket(bucketHistory), t.bucket(bucketHistoryByTime)
	var keys, times [][]byte
	c := history.Cursor()
	for _, prefix := range [][]byte{indexKey(nil, tenant, conversation), append(indexKey(nil, tenant), threads...)} {
		for k, v := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
			if len(k) < 8 || len(v) < 8 {
				return fmt.Errorf("history %q: malformed", k)
			}
			keys = append(keys, bytes.Clone(k))
			times = append(times, timeIDKey([8]byte(v[:8]), k[len(k)-8:]))
		}
	}
	for i, k := range keys {
		if err := history.Delete(k); err != nil {
			return err
		}
		if err := byTime.Delete(times[i]); err != nil {
			return err
		}
	}
	deleted(len(keys))
	return nil
}

// each calls fn with every record of the file, kind by kind (first with
// a nil record, as each kind begins), in an order that keeps references
// whole: documents before views, runs before deliveries. A record is the
// encoded[T] of its type, with the bytes it is stored as (a turn's
// record's JSON, its Seq and messages in rec); a document is an htmlDoc,
// an arrival an arrival. CopyToPostgres reads with it.
func (t boltTx) each(ctx context.Context, fn func(kind string, rec any) error) error {
	for _, k := range []struct {
		kind, bucket string
		rec          func(k, v []byte) (any, error)
	}{
		{"html", bucketHTML, func(k, v []byte) (any, error) { return htmlDoc{string(k), bytes.Clone(v)}, nil }},
		{"runs", bucketRuns, eachJSON[Run]},
		{"views", bucketViews, eachJSON[View]},
		{"audit records", bucketAudit, func(k, v []byte) (any, error) {
			if len(k) != 16 {
				return nil, fmt.Errorf("audit key of %d bytes", len(k))
			}
			r, err := decodeAudit(k, v)
			return encoded[AuditRecord]{r, bytes.Clone(v)}, err
		}},
		{"conversations", bucketConversations, eachJSON[ConversationRef]},
		{"deliveries", bucketDeliveries, eachJSON[Delivery]},
		{"bindings", bucketBindings, eachJSON[Binding]},
		{"tenant settings", bucketTenantSettings, eachJSON[TenantSettings]},
		{"policy sets", bucketPolicySets, eachJSON[PolicySet]},
		{"API keys", bucketAPIKeys, eachJSON[APIKey]},
		{"triggers", bucketTriggers, eachJSON[Trigger]},
		{"MCP connections", bucketMCPConnections, eachJSON[MCPConnection]},
		{"MCP authorization requests", bucketMCPAuthRequests, eachJSON[MCPAuthRequest]},
		{"questions", bucketQuestions, eachJSON[Question]},
		{"history turns", bucketHistory, func(k, v []byte) (any, error) {
			tr, err := boltTurn(k, v)
			if err != nil {
				return nil, err
			}
			record, _, _ := turnValueParts(v)
			return encoded[HistoryTurn]{tr, bytes.Clone(record)}, nil
		}},
		{"activities", bucketActivities, func(k, v []byte) (any, error) {
			if len(v) != 8 {
				return nil, fmt.Errorf("expiry of %d bytes", len(v))
			}
			return arrival{string(k), nsTime(keyNS([8]byte(v)))}, nil
		}},
		{"usage counters", bucketUsage, func(k, v []byte) (any, error) {
			tenant, rest, ok := bytes.Cut(k, []byte{0})
			if !ok || len(rest) < 5 || len(v) != 8 {
				return nil, fmt.Errorf("usage counter of %d and %d bytes", len(k), len(v))
			}
			metric, label, ok := bytes.Cut(rest[4:], []byte{0})
			if !ok {
				return nil, errors.New("usage counter without a metric")
			}
			return usageCount{tenant: string(tenant), day: int32(binary.BigEndian.Uint32(rest[:4]) ^ (1 << 31)),
				metric: string(metric), label: string(label), n: int64(binary.BigEndian.Uint64(v))}, nil
		}},
	} {
		if err := fn(k.kind, nil); err != nil {
			return err
		}
		b := t.bucket(k.bucket)
		if b == nil {
			continue
		}
		if err := b.ForEach(func(key, value []byte) error {
			if err := ctx.Err(); err != nil {
				return err
			}
			rec, err := k.rec(key, value)
			if err != nil {
				return fmt.Errorf("%s %q: %w", k.kind, key, err)
			}
			return fn(k.kind, rec)
		}); err != nil {
			return err
		}
	}
	return nil
}

// eachJSON decodes a stored record for each.
func eachJSON[T any](_, v []byte) (any, error) {
	var r T
	err := json.Unmarshal(v, &r)
	return encoded[T]{r, bytes.Clone(v)}, err
}
