package playground

import (
	"encoding/json"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Bounds of what the playground keeps in memory: it is a tool for one
// person on their own machine, and old conversations simply fall away.
const (
	maxChats     = 64
	maxItems     = 200
	maxLog       = 200
	typingFor    = 3 * time.Second
	maxLongPoll  = 25 * time.Second
	maxBodyBytes = 1 << 20
)

// Conversation kinds, as Teams names them in conversation.conversationType.
const (
	kindPersonal = "personal"
	kindGroup    = "groupChat"
	kindChannel  = "channel"
)

// item is one message of a conversation as the page shows it: the
// person's, the bot's, or an event the playground notes (an install).
type item struct {
	ID          string       `json:"id"`
	From        string       `json:"from"` // "user", "bot" or "event"
	Name        string       `json:"name,omitempty"`
	Text        string       `json:"text,omitempty"`
	Summary     string       `json:"summary,omitempty"`
	Attachments []attachment `json:"attachments,omitempty"`
	ReplyToID   string       `json:"replyToId,omitempty"`
	// Revision is 1 when the activity was posted and grows with each
	// update, which the page uses to redraw it in place.
	Revision int  `json:"revision"`
	Deleted  bool `json:"deleted,omitempty"`
	// Streaming is set while the message is an open stream showing the
	// bot's informative updates.
	Streaming bool      `json:"streaming,omitempty"`
	Views     []viewRef `json:"views,omitempty"`
	Time      time.Time `json:"time"`
	// AI and Citations are what the bot's root message entity says, as
	// Teams shows it: the "AI generated" label, and the citations whose
	// positions the text's [n] markers name.
	AI        bool          `json:"ai,omitempty"`
	Citations []citationRef `json:"citations,omitempty"`

	resolving bool // a lookup of the views this card names is under way
	// conversation is the conversation id the bot sent the activity to
	// (a channel's thread names its post), which a card's Action.Submit
	// names again.
	conversation string
}

// attachment is an activity's attachment, an Adaptive Card for the bot's.
type attachment struct {
	ContentType string          `json:"contentType"`
	Content     json.RawMessage `json:"content,omitempty"`
}

// citationRef is one citation of a bot message, as Teams' pop-up shows it.
type citationRef struct {
	Position int      `json:"position"`
	Name     string   `json:"name"`
	URL      string   `json:"url,omitempty"`
	Abstract string   `json:"abstract,omitempty"`
	Keywords []string `json:"keywords,omitempty"`
}

// logEntry is one activity that went to the bot or came from it, as the
// page's activity inspector lists it: N counts a chat's entries from 1.
type logEntry struct {
	N        uint64          `json:"n"`
	Dir      string          `json:"dir"`  // "to-bot" or "from-bot"
	Call     string          `json:"call"` // the HTTP method and path
	Activity json.RawMessage `json:"activity,omitempty"`
	Time     time.Time       `json:"time"`
}

// viewRef is a view an answer card names, as the page frames it.
type viewRef struct {
	ID     string `json:"id"`
	Title  string `json:"title"`
	Tool   string `json:"tool"`
	Server string `json:"server"`
}

// chat is one conversation: a personal chat, a group chat, or a channel
// (whose threads all show in it).
type chat struct {
	id, kind, tenant string
	items            []*item
	typingUntil      time.Time
	seq              uint64 // the chats' seq at this chat's last change
	used             time.Time
	log              []*logEntry
	logged           uint64 // the N of the last entry
}

func (c *chat) find(id string) *item {
	for _, it := range c.items {
		if it.ID == id {
			return it
		}
	}
	return nil
}

// chats holds every conversation, and wakes the page's long polls when
// one changes.
type chats struct {
	now func() time.Time

	mu      sync.Mutex
	byID    map[string]*chat
	seq     uint64
	nextID  int64
	changed chan struct{} // closed and replaced on every change
}

func newChats(now func() time.Time) *chats {
	return &chats{
		now:     now,
		byID:    map[string]*chat{},
		nextID:  now().UnixMilli(),
		changed: make(chan struct{}),
	}
}

// newID is a fresh activity id; Teams' are numbers too.
func (cs *chats) newIDLocked() string {
	cs.nextID++
	return strconv.FormatInt(cs.nextID, 10)
}

// chatLocked returns the chat of a conversation id (a channel thread
// belongs to its channel), creating it when it is new. The oldest chat
// goes when there are too many.
func (cs *chats) chatLocked(conversationID, kind, tenant string) *chat {
	root, _, _ := strings.Cut(conversationID, ";")
	c := cs.byID[root]
	if c == nil {
		if len(cs.byID) >= maxChats {
			var oldest *chat
			for _, o := range cs.byID {
				if oldest == nil || o.used.Before(oldest.used) {
					oldest = o
				}
			}
			delete(cs.byID, oldest.id)
		}
		c = &chat{id: root}
		cs.byID[root] = c
	}
	if c.kind == "" {
		c.kind = kind
	}
	if c.tenant == "" {
		c.tenant = tenant
	}
	c.used = cs.now()
	return c
}

// touchLocked records a change of c and wakes the long polls.
func (cs *chats) touchLocked(c *chat) {
	cs.seq++
	c.seq = cs.seq
	close(cs.changed)
	cs.changed = make(chan struct{})
}

// addLocked appends an item to c, dropping the oldest beyond maxItems.
func (cs *chats) addLocked(c *chat, it *item) {
	if it.Revision == 0 {
		it.Revision = 1
	}
	if it.Time.IsZero() {
		it.Time = cs.now()
	}
	c.items = append(c.items, it)
	if len(c.items) > maxItems {
		c.items = append([]*item(nil), c.items[len(c.items)-maxItems:]...)
	}
	cs.touchLocked(c)
}

// logLocked adds an activity to the inspector's list of c, dropping the
// oldest beyond maxLog.
func (cs *chats) logLocked(c *chat, dir, call string, activity []byte) {
	c.logged++
	e := &logEntry{N: c.logged, Dir: dir, Call: call, Time: cs.now()}
	if json.Valid(activity) {
		e.Activity = append(json.RawMessage(nil), activity...)
	}
	c.log = append(c.log, e)
	if len(c.log) > maxLog {
		c.log = append([]*logEntry(nil), c.log[len(c.log)-maxLog:]...)
	}
	cs.touchLocked(c)
}

// note adds an event line to a conversation.
func (cs *chats) note(conversationID, kind, tenant, text string) {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	c := cs.chatLocked(conversationID, kind, tenant)
	cs.addLocked(c, &item{ID: cs.newIDLocked(), From: "event", Text: text})
}

// snapshot is a conversation as the page reads it.
type snapshot struct {
	Seq      uint64 `json:"seq"`
	TypingMS int64  `json:"typingMs,omitempty"`
	Items    []item `json:"items"`
	// Activities are the inspector's entries after the page's last one.
	Activities []logEntry `json:"activities"`
}

// snapshotLocked copies c's items and its inspector's entries after N
// after (all of them when after is past the last, as after a restart), so
// the page's answer is written after the lock is released.
func (cs *chats) snapshotLocked(c *chat, after uint64) snapshot {
	s := snapshot{Seq: c.seq, Items: make([]item, 0, len(c.items)), Activities: []logEntry{}}
	if after > c.logged {
		after = 0
	}
	for _, e := range c.log {
		if e.N > after {
			s.Activities = append(s.Activities, *e)
		}
	}
	if d := c.typingUntil.Sub(cs.now()); d > 0 {
		s.TypingMS = d.Milliseconds()
	}
	for _, it := range c.items {
		s.Items = append(s.Items, *it)
	}
	return s
}
