"""A micro-batch to the driver as Arrow and back, on pyspark 3.5 and 4.

Invariants: :func:`to_arrow` keeps the DataFrame's row order (partition by partition);
:func:`to_frame` types each column as the DataFrame it came from had it, Spark column
metadata included (control-column marks survive the round trip).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pyarrow as pa

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructType


def to_arrow(df: DataFrame) -> pa.Table:
    """Every row of ``df`` on the driver, as one Arrow table."""
    if hasattr(df, "toArrow"):  # pyspark 4
        return df.toArrow()
    return pa.Table.from_pandas(df.toPandas(), preserve_index=False)


def to_frame(spark: SparkSession, table: pa.Table, like: StructType) -> DataFrame:
    """``table`` as a DataFrame, each column typed as in ``like`` where ``like`` has it,
    else from its Arrow type (nullable)."""
    from pyspark.sql.pandas.types import from_arrow_type
    from pyspark.sql.types import StructField, StructType

    known = {f.name: f for f in like.fields}
    schema = StructType(
        [
            known.get(f.name) or StructField(f.name, from_arrow_type(f.type), True)
            for f in table.schema
        ]
    )
    if table.num_rows == 0:
        return spark.createDataFrame([], schema)
    data: Any = table if int(spark.version.split(".")[0]) >= 4 else table.to_pandas()
    return spark.createDataFrame(data, schema)
