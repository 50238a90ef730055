import { HISTORY_PAGE_MAX_BYTES } from '@dsh/protocol/limits'
import { McpError } from './errors.js'

/** Checks a `maxHistoryPageBytes` option: a positive safe integer, else `MCP_INVALID_OPTIONS`. */
export function historyPageCap(value: number | undefined): number {
  if (value === undefined) return HISTORY_PAGE_MAX_BYTES
  if (!Number.isSafeInteger(value) || value < 1)
    throw new McpError('MCP_INVALID_OPTIONS', `maxHistoryPageBytes must be a positive integer, got ${String(value)}.`)
  return value
}
