// Alarms at a time of performance.now()'s clock, in one list soonest first, served by one timer. A
// Node timer for each (a Timeout made, put in its list and cleared) was part of every request's
// main-thread time: a request's deadline and its body's pace each set one (docs/performance.md).
// Most alarms are set a fixed time from now, later than every one set before: found at the tail.

export interface Alarm {
  at: number;
  ring: () => void;
  prev: Alarm | null;
  next: Alarm | null;
  set: boolean;
}

const list: { head: Alarm | null; tail: Alarm | null; timer: ReturnType<typeof setTimeout> | null; timerAt: number } = { head: null, tail: null, timer: null, timerAt: Infinity };

/** `ring` is called once `at` has passed, unless the alarm is cleared first. */
export function setAlarm(at: number, ring: () => void): Alarm {
  const a: Alarm = { at, ring, prev: null, next: null, set: true };
  let after = list.tail;
  while (after !== null && after.at > at) after = after.prev;
  a.prev = after;
  a.next = after === null ? list.head : after.next;
  if (after === null) list.head = a;
  else after.next = a;
  if (a.next === null) list.tail = a;
  else a.next.prev = a;
  if (at < list.timerAt) arm(at);
  return a;
}

/** The timer is left as it is: when it fires it re-arms for the alarm first in line, if any. */
export function clearAlarm(a: Alarm | null | undefined): void {
  if (!a?.set) return;
  a.set = false;
  if (a.prev === null) list.head = a.next;
  else a.prev.next = a.next;
  if (a.next === null) list.tail = a.prev;
  else a.next.prev = a.prev;
  a.prev = a.next = null;
}

function arm(at: number): void {
  if (list.timer !== null) clearTimeout(list.timer);
  list.timerAt = at;
  // Timers count whole milliseconds and may fire a fraction early: an alarm not due yet re-arms it.
  // Not holding the process open: whoever waits on an alarm holds it (a socket, a caller).
  list.timer = setTimeout(fire, Math.max(1, Math.ceil(at - performance.now()))).unref();
}

function fire(): void {
  list.timer = null;
  list.timerAt = Infinity;
  const now = performance.now();
  while (list.head !== null && list.head.at <= now) {
    const a = list.head;
    clearAlarm(a);
    a.ring();
  }
  if (list.head !== null) arm(list.head.at);
}
