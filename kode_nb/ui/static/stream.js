// StreamView's front end (kode_nb/ui/stream.py): shows a growing text that arrives as chunks.
//
// The kernel keeps the whole text; the browser keeps it only while the model has a view. The
// first view of a model asks for the text so far ({event: "replay"} -> {reset: text}), later
// chunks come as {append: chunk}. When the last view is removed (output cleared, cell re-run)
// or the model is closed, the browser drops its copy, so a long session does not grow.

const STREAMS = new Map(); // model key -> { text, views: Set<(chunk: string | null) => void> }
const MAX_SHOWN = 200000;

function show(st, pre) {
  const t = st.text;
  pre.hidden = !t; // a stream whose text was all taken back (kept as the call's result) shows nothing
  pre.textContent =
    t.length > MAX_SHOWN
      ? `[… ${t.length - MAX_SHOWN} earlier characters not shown]\n` + t.slice(-MAX_SHOWN)
      : t;
}

/** How many streams the browser holds text for (for tests: pruning is observable). */
export function liveStreams() {
  return STREAMS.size;
}

export default {
  initialize({ model }) {
    const key = model.get("key");
    const onMsg = (msg) => {
      const st = STREAMS.get(key);
      if (!st || !msg) return; // no view: the kernel replays the text to the next one
      if (typeof msg.reset === "string") {
        st.text = msg.reset;
        for (const v of st.views) v(null);
      } else if (typeof msg.append === "string") {
        st.text += msg.append;
        for (const v of st.views) v(msg.append);
      }
    };
    model.on("msg:custom", onMsg);
    return () => {
      model.off("msg:custom", onMsg);
      STREAMS.delete(key);
    };
  },
  render({ model, el }) {
    const key = model.get("key");
    let st = STREAMS.get(key);
    if (!st) {
      st = { text: "", views: new Set() };
      STREAMS.set(key, st);
      model.send({ event: "replay" }); // the text so far, kept by the kernel
    }
    const pre = document.createElement("pre");
    pre.className = "kode-stream";
    el.appendChild(pre);
    show(st, pre);
    requestAnimationFrame(() => {
      pre.scrollTop = pre.scrollHeight; // once laid out
    });
    const onChunk = (chunk) => {
      const atEnd = pre.scrollTop + pre.clientHeight >= pre.scrollHeight - 8;
      if (chunk === null || st.text.length > MAX_SHOWN) show(st, pre);
      else pre.appendChild(document.createTextNode(chunk));
      if (atEnd) pre.scrollTop = pre.scrollHeight;
    };
    st.views.add(onChunk);
    return () => {
      st.views.delete(onChunk);
      if (st.views.size === 0 && STREAMS.get(key) === st) STREAMS.delete(key);
    };
  },
};
