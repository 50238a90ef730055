/** Event types this driver adds to the session vocabulary (beside turn, user, assistant and tool events). */
declare module '@dsh/session' {
  interface SessionEventMap {
    /** A streamed reasoning delta (DeepSeek's `reasoning_content`); sent back to the model only in turns that called tools. */
    'assistant/reasoning': { turn: number; index: number; delta: string }
    /** Why the turn failed: a typed error's code and message (never the API key). Followed by `turn/end {reason: 'error'}`. */
    'assistant/error': { turn: number; code: string; message: string }
  }
}

export const ASSISTANT_REASONING_EVENT = 'assistant/reasoning'
export const ASSISTANT_ERROR_EVENT = 'assistant/error'
