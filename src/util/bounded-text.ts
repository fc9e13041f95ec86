// Text that user code chose (an error it threw, a message it built) is cut to a few KB before it
// reaches an answer, a log line or the job store: a UDF that throws "A".repeat(1e8) must cost a
// 4 KB message, not a 200 MB answer or a job record every describe returns.

/** The most characters of user-chosen text kept in an error message. */
export const MAX_ERROR_CHARS = 4096;

/** `text` cut to `max` characters, saying how many were cut. */
export function boundedText(text: string, max = MAX_ERROR_CHARS): string {
  return text.length <= max ? text : `${text.slice(0, max)}… (${text.length - max} more characters cut)`;
}
