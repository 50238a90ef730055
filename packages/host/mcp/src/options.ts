import { McpError } from './errors.js'

/** A server option that must be a positive safe integer: `fallback` when absent, else `MCP_INVALID_OPTIONS` naming it. */
export function positiveOption(name: string, value: number | undefined, fallback: number): number {
  if (value === undefined) return fallback
  if (!Number.isSafeInteger(value) || value < 1)
    throw new McpError('MCP_INVALID_OPTIONS', `${name} must be a positive integer, got ${String(value)}.`)
  return value
}
