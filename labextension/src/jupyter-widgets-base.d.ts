/** `@jupyter-widgets/base`, shared at run time by the ipywidgets extension (never bundled here):
 * only its module object is used, by src/core/widget_guard.ts. */
declare module '@jupyter-widgets/base';
