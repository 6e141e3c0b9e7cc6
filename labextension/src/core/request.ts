/**
 * A model call's request, whole. Since kode_nb.trace/v3 each model_call span stores its request
 * as what it added to the previous model call of its run (kode_nb/traces/_requests.py):
 *
 *   {provider, path, model, body, extends: {span_id, same: [key...], keep: {key: N}}}
 *
 * where a body key named in `same` holds null (the previous body's value) and one named in
 * `keep` holds only the items after the previous body's first N. A request with no `extends`
 * (every one of a v1/v2 record) is whole. No DOM here.
 */

import { isObject } from './json';
import { FlatTrace } from './trace';

type Obj = Record<string, unknown>;

const INDEXES = new WeakMap<FlatTrace, Map<string, Obj>>();

/** The stored `request` of each model call of `flat`, by span id (built once per trace). */
function storedRequests(flat: FlatTrace): Map<string, Obj> {
  let index = INDEXES.get(flat);
  if (!index) {
    index = new Map();
    for (const s of flat.spans) {
      const request = s.span.attributes['request'];
      if (s.span.kind === 'model_call' && isObject(request)) {
        index.set(s.span.span_id, request);
      }
    }
    INDEXES.set(flat, index);
  }
  return index;
}

function apply(base: Obj, step: Obj): Obj {
  const extendsOf = step['extends'] as Obj;
  const from = String(extendsOf['span_id']);
  const same = Array.isArray(extendsOf['same']) ? extendsOf['same'].map(String) : [];
  const keep = isObject(extendsOf['keep']) ? extendsOf['keep'] : {};
  const stored = step['body'];
  if (!isObject(stored)) {
    throw new Error(`a request extending model call ${from} has no body`);
  }
  const body: Obj = {};
  for (const [key, value] of Object.entries(stored)) {
    if (same.includes(key)) {
      if (!(key in base)) {
        throw new Error(`model call ${from}'s body has no "${key}" to reuse`);
      }
      body[key] = base[key];
    } else if (key in keep) {
      const n = keep[key];
      const old = base[key];
      if (
        typeof n !== 'number' ||
        !Array.isArray(old) ||
        !Array.isArray(value) ||
        n < 0 ||
        n > old.length
      ) {
        throw new Error(`model call ${from}'s body has no ${String(n)} items of "${key}"`);
      }
      body[key] = old.slice(0, n).concat(value);
    } else {
      body[key] = value;
    }
  }
  return body;
}

/**
 * The whole request (`{provider, path, model, body}`) of a model call whose stored request is
 * `request`, rebuilt from the model calls of `flat` it extends. Throws an Error naming the model
 * call that is missing or does not fit (never a guess).
 */
export function wholeRequest(flat: FlatTrace, request: Obj): Obj {
  const chain: Obj[] = [request];
  const seen = new Set<string>();
  const index = storedRequests(flat);
  for (let last = request; isObject(last['extends']);) {
    const id = String(last['extends']['span_id']);
    if (seen.has(id)) {
      throw new Error(`the stored requests extend each other in a loop (${id})`);
    }
    seen.add(id);
    const found = index.get(id);
    if (!found) {
      throw new Error(`the request extends model call ${id}, which the trace does not have`);
    }
    chain.push(found);
    last = found;
  }
  const first = chain.pop()!;
  if (!chain.length) {
    return first; // whole
  }
  if (!isObject(first['body'])) {
    throw new Error(`the request of model call ${[...seen].pop() ?? '?'} has no body`);
  }
  let body: Obj = first['body'];
  let whole: Obj = first;
  while (chain.length) {
    const step = chain.pop()!;
    body = apply(body, step);
    whole = { ...step, body };
    delete whole['extends'];
  }
  return whole;
}
